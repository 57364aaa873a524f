//! Testing crash points: the cut, the (nested) recovery, the check of the
//! recovered disk and the workload after it (steps 1–6 of the module docs
//! of [`super`]).

use super::{new_session, new_workload, next_request, NestedCut, Plan, PointResult, Stage, SyntheticWorkload};
use crate::flash::FlashError;
use crate::flash::PowerCut;
use crate::ftl::{FtlError, IoRequest};
use crate::oracle::crash_checker::{CrashChecker, CrashHistory, PendingOp};
use crate::run::drive::Drive;
use crate::run::host_side::HostSide;
use crate::run::{submit, RunError, Session};
use crate::seed::{derive_seed, rng_for};
use crate::violation::{Rule, Violation, ViolationLog};
use crate::workload::{HostOp, HostRequest};
use rand::RngExt;
use std::collections::BTreeMap;

/// The host request in flight at the cuts being tested.
pub(super) struct Request<'a> {
    /// Its index in the workload (requests before it: `id`).
    pub id: u64,
    pub in_flight: Option<PendingOp>,
    /// What the host knew before it.
    pub history: &'a CrashHistory,
}

/// Test the cuts that fell in `request` (which the base run just served).
pub(super) fn test_request(
    plan: &Plan,
    session: &mut Session,
    request: &Request,
    cuts: &[PowerCut],
) -> Vec<PointResult> {
    if plan.opts.effects.write_cache_lost {
        cuts.iter().map(|&cut| test_point(plan, session, request, cut)).collect()
    } else {
        test_protected(plan, request, cuts)
    }
}

fn new_result(cut: PowerCut, request: u64) -> PointResult {
    PointResult {
        cut,
        request,
        tore: false,
        torn_pages: 0,
        torn_blocks: 0,
        nested_cut: None,
        recovery_cut: None,
        recovery_state_changes: 0,
        recovery_torn_pages: 0,
        recovery_torn_blocks: 0,
        recovery_ops: 0,
        passed: true,
        stage: None,
        rules: BTreeMap::new(),
        first: None,
    }
}

/// A point's own random stream for `what` (the nested cut, the workload
/// after recovery): separate streams, so fixing the nested cut (a
/// reproducer) leaves the workload after recovery as the campaign ran it.
fn point_rng(plan: &Plan, cut: PowerCut, what: &str) -> crate::seed::Rng {
    rng_for(derive_seed(plan.opts.seed, "crash.point"), &format!("{}:{}:{what}", cut.op_index, cut.during))
}

/// Fill the result from the test's violation log.
fn take_findings(drive: &mut Drive, result: &mut PointResult) {
    let log = drive.take_log();
    result.rules = log.counts().clone();
    result.first = log.first_error().cloned();
    result.passed = log.is_clean();
}

/// One cut on the base run's drive: roll back to it, test, roll forward.
/// The base run's host side is not touched: the test runs its own.
fn test_point(plan: &Plan, session: &mut Session, request: &Request, cut: PowerCut) -> PointResult {
    let (drive, host) = session.parts_mut();
    let base = drive.cut_power_for_test(cut);
    let mut result = new_result(cut, request.id);
    (result.torn_pages, result.torn_blocks) = base.torn();
    result.tore = result.torn_pages + result.torn_blocks > 0;
    let checker = request.history.checker(request.in_flight);
    recover_and_check(plan, drive, host, checker, cut, &mut result);
    take_findings(drive, &mut result);
    drive.restore_base_run(base);
    result
}

/// Cuts on a drive with power-loss protection (see the module docs of
/// [`super`]): a fresh drive replays the workload through `request`, the
/// old FTL instance runs its emergency flush, then each cut's recovery is
/// tested on that image and rolled back.
fn test_protected(plan: &Plan, request: &Request, cuts: &[PowerCut]) -> Vec<PointResult> {
    let (mut session, flush_log) = match replay_and_flush(plan, request.id) {
        Ok(r) => r,
        Err(e) => {
            // The replay is the base run again: it cannot fail where the base run did not.
            let mut results: Vec<PointResult> = cuts.iter().map(|&c| new_result(c, request.id)).collect();
            for r in &mut results {
                r.passed = false;
                r.stage = Some(Stage::EmergencyFlush);
                r.first = Some(finding(Rule::FtlError, format!("replaying the workload failed: {e}")));
                r.rules.insert(Rule::FtlError, 1);
            }
            return results;
        }
    };
    let mut results = Vec::with_capacity(cuts.len());
    let (drive, host) = session.parts_mut();
    for &cut in cuts {
        let at = PowerCut { op_index: drive.flash().op_index(), during: false };
        let base = drive.cut_power_for_test(at);
        drive.replace_log(flush_log.clone());
        let mut result = new_result(cut, request.id);
        if !flush_log.is_clean() {
            result.stage = Some(Stage::EmergencyFlush);
        } else {
            let checker = request.history.checker(request.in_flight).all_acknowledged_durable();
            recover_and_check(plan, drive, host, checker, cut, &mut result);
        }
        take_findings(drive, &mut result);
        drive.restore_base_run(base);
        results.push(result);
    }
    results
}

/// A fresh drive through request `last` of the workload, then the old
/// instance's emergency flush; returns the drive (journaling) and the
/// flush's violations.
fn replay_and_flush(plan: &Plan, last: u64) -> Result<(Session, ViolationLog), RunError> {
    let mut session = new_session(plan)?;
    let mut workload: SyntheticWorkload = new_workload(plan.config, plan.spec, plan.opts.seed)?;
    for _ in 0..=last {
        let Some(req) = next_request(&mut workload)? else { break };
        session.submit(&req)?;
    }
    let drive = session.drive_mut();
    let _ = drive.take_log(); // the base run reports the run's own violations
    drive.start_journal();
    drive.set_request(None);
    if let Err(e) = drive.emergency_flush() {
        drive.record_violation(Rule::FtlError, format!("the emergency flush failed: {e}"));
    }
    let log = drive.take_log();
    Ok((session, log))
}

/// Steps 2–5 of a crash test (see the module docs). Findings go to the
/// drive's log. The workload after recovery runs on a host side of its own
/// (continuing `base_host` with what recovery showed), dropped afterwards:
/// nothing of the test reaches the base run's host side.
fn recover_and_check(
    plan: &Plan,
    drive: &mut Drive,
    base_host: &HostSide,
    mut checker: CrashChecker,
    cut: PowerCut,
    result: &mut PointResult,
) {
    drive.restore_power();
    drive.set_request(None);
    let final_stage = if plan.opts.nested { Stage::RecoveryAfterNestedCut } else { Stage::Recovery };
    if plan.opts.nested && !first_recovery_cut(plan, drive, &mut point_rng(plan, cut, "nested"), result) {
        return;
    }
    let start = drive.flash().op_index();
    if let Err(e) = drive.power_cycle(false) {
        drive.record_violation(Rule::RecoveryFailed, format!("mount after the power cut failed: {e}"));
        note_stage(drive, result, final_stage);
        return;
    }
    result.recovery_ops = drive.flash().op_index() - start;
    if note_stage(drive, result, final_stage) {
        return;
    }
    let verified = verify_disk(drive, &mut checker, plan.config.logical_sectors, plan.opts.verify_chunk_sectors);
    if verified {
        checker.finish(&mut drive.checker());
    }
    if note_stage(drive, result, Stage::Verify) || plan.opts.post_requests == 0 {
        return;
    }
    let mut host = base_host.continued_with(checker.recovered_oracle());
    run_post_workload(plan, drive, &mut host, &mut point_rng(plan, cut, "post"));
    note_stage(drive, result, Stage::PostWorkload);
}

/// Record where the first finding appeared; true if the log has one.
fn note_stage(drive: &Drive, result: &mut PointResult, stage: Stage) -> bool {
    let found = !drive.flash().log().is_clean();
    if found && result.stage.is_none() {
        result.stage = Some(stage);
    }
    found
}

/// Step 2: recover once uncut to learn the recovery's state-changing
/// operations, roll it back, and recover again with the power cut at the
/// point's nested cut. False if the uncut recovery failed (recorded).
///
/// Nothing either recovery reports is thrown away: the interrupted one
/// repeats the uncut one up to the cut, so a finding of the first recovery
/// can count twice in the point's counts.
fn first_recovery_cut(plan: &Plan, drive: &mut Drive, rng: &mut crate::seed::Rng, result: &mut PointResult) -> bool {
    let mark = drive.mark();
    let mounted = drive.power_cycle(false);
    let changes = drive.state_changes_since(mark);
    let end = drive.flash().op_index();
    if let Err(e) = mounted {
        drive.record_violation(Rule::RecoveryFailed, format!("mount after the power cut failed: {e}"));
        note_stage(drive, result, Stage::Recovery);
        return false;
    }
    drive.roll_back_to(mark);
    drive.restore_power();
    let n = changes.len() as u32;
    let wanted = plan.opts.nested_at.unwrap_or_else(|| draw_nested(rng, n));
    // After the last state-changing operation there is nothing to tear.
    let nested = if wanted.nth >= n { NestedCut { nth: n, during: false } } else { wanted };
    let op_index = changes.get(nested.nth as usize).copied().unwrap_or(end);
    let cut = PowerCut { op_index, during: nested.during };
    (result.nested_cut, result.recovery_cut, result.recovery_state_changes) = (Some(nested), Some(cut), n);
    drive.schedule_power_cut(cut);
    let _ = drive.take_torn();
    let _ = drive.power_cycle(false); // fails with the power cut (unless it falls after the last operation)
    (result.recovery_torn_pages, result.recovery_torn_blocks) = drive.take_torn();
    drive.restore_power();
    note_stage(drive, result, Stage::Recovery);
    true
}

/// One of the `2n + 1` distinct nested cuts, uniformly.
fn draw_nested(rng: &mut crate::seed::Rng, n: u32) -> NestedCut {
    let j = rng.random_range(0..=2 * n);
    NestedCut { nth: j / 2, during: j % 2 == 1 }
}

/// Read every logical sector through the recovered FTL into the checker.
/// False if the FTL failed a read (recorded).
pub(crate) fn verify_disk(drive: &mut Drive, checker: &mut CrashChecker, total: u64, chunk: u32) -> bool {
    let mut lba = 0;
    let chunk = u64::from(chunk.max(1));
    // Hints two chunks ahead: the FTL warms its map for the later one and
    // the flash pages of the nearer one (a speed hint; it changes nothing).
    let hint = |drive: &mut Drive, at: u64| {
        if at < total {
            drive.prefetch(at, (total - at).min(chunk) as u32);
        }
    };
    hint(drive, 0);
    hint(drive, chunk);
    while lba < total {
        let n = (total - lba).min(chunk) as u32;
        hint(drive, lba + 2 * chunk);
        let buf = drive.alloc_host_read(n);
        let io = IoRequest { id: u64::MAX, lba, sectors: n, buf };
        match drive.read(&io) {
            Ok(()) => {
                let _ = drive.inspect_buffer(buf, |runs, ck| checker.check_read(ck, lba, runs));
            }
            Err(e) if is_media_error(drive, &e) => {
                drive.free_host_buffer(buf);
                if !verify_sectors(drive, checker, lba, n) {
                    return false;
                }
            }
            Err(e) => {
                drive.free_host_buffer(buf);
                drive.record_violation(
                    Rule::FtlError,
                    format!("read of {n} sectors at LBA {lba} after recovery failed: {e}"),
                );
                return false;
            }
        }
        drive.free_host_buffer(buf);
        lba += u64::from(n);
    }
    true
}

/// A read failed with a media error, the reliability model on.
fn is_media_error(drive: &Drive, e: &FtlError) -> bool {
    matches!(e, FtlError::Flash(FlashError::Uncorrectable)) && drive.flash().reliability().is_some()
}

/// A chunk failed with a media error: read its sectors one at a time. A
/// sector whose read fails so is accepted when the model recorded some
/// version of it lost to the media (recovery may legitimately map the
/// sector to any version the guarantee allows, and a lost one reads as an
/// error); otherwise it is `read_error_on_good_data`. False if a read
/// failed that way or otherwise (recorded).
fn verify_sectors(drive: &mut Drive, checker: &mut CrashChecker, first: u64, n: u32) -> bool {
    for lba in first..first + u64::from(n) {
        let buf = drive.alloc_host_read(1);
        let io = IoRequest { id: u64::MAX, lba, sectors: 1, buf };
        let read = drive.read(&io);
        match read {
            Ok(()) => {
                let _ = drive.inspect_buffer(buf, |runs, ck| checker.check_read(ck, lba, runs));
            }
            Err(e) if is_media_error(drive, &e) => {
                let lost = drive.flash().reliability().is_some_and(|r| r.lba_lost_to_media(lba as u32));
                if !lost {
                    drive.free_host_buffer(buf);
                    drive.record_violation(
                        Rule::ReadErrorOnGoodData,
                        format!(
                            "read of LBA {lba} after recovery failed with a media error, but no version of it was \
                             lost to the media"
                        ),
                    );
                    return false;
                }
                drive.count_host_read_error();
            }
            Err(e) => {
                drive.free_host_buffer(buf);
                drive.record_violation(Rule::FtlError, format!("read of LBA {lba} after recovery failed: {e}"));
                return false;
            }
        }
        drive.free_host_buffer(buf);
    }
    true
}

/// More workload on the recovered drive, its reads checked (by `host`,
/// whose oracle is what recovery showed); then the sectors it wrote are
/// read back.
fn run_post_workload(plan: &Plan, drive: &mut Drive, host: &mut HostSide, rng: &mut crate::seed::Rng) {
    let seed = rng.random::<u64>();
    let Ok(mut w) = new_workload(plan.config, plan.spec, seed) else { return };
    let mut written = Vec::new();
    for _ in 0..plan.opts.post_requests {
        let Ok(Some(req)) = next_request(&mut w) else { break };
        if submit(drive, host, &req).is_err() || drive.ftl_failed() {
            return;
        }
        if req.op == HostOp::Write {
            written.push((req.lba, req.sectors));
        }
        if !drive.flash().log().is_clean() {
            return;
        }
    }
    for (lba, sectors) in written {
        let read = HostRequest { op: HostOp::Read, lba, sectors, arrival_ns: 0, job: 0 };
        if submit(drive, host, &read).is_err() || drive.ftl_failed() || !drive.flash().log().is_clean() {
            return;
        }
    }
}

fn finding(rule: Rule, message: String) -> Violation {
    let severity = crate::violation::Severity::Error;
    Violation { rule, severity, op_index: 0, request_id: None, address: 0, message, source: None }
}
