//! Testing crash points: the cut, the (nested) recovery, the check of the
//! recovered disk and the workload after it (steps 1–6 of the module docs
//! of [`super`]).

use super::{new_session, new_workload, next_request, NestedCut, Plan, PointResult, Stage, SyntheticWorkload};
use crate::flash::PowerCut;
use crate::ftl::{Ftl, FtlError, Guarantee, IoRequest};
use crate::nand::Nand;
use crate::oracle::crash_checker::{CrashChecker, CrashHistory, PendingOp};
use crate::run::{RunError, Session};
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
fn take_findings(session: &mut Session, result: &mut PointResult) {
    let log = session.flash.take_log();
    result.rules = log.counts().clone();
    result.first = log.first_error().cloned();
    result.passed = log.is_clean();
}

/// The base run's host-side state, kept aside while a crash point is tested.
struct HostState {
    ftl: Box<dyn Ftl>,
    oracle: crate::oracle::Oracle,
    host: crate::run::HostCounters,
    next_write_id: u32,
    next_request_id: u64,
    ftl_failed: bool,
}

impl HostState {
    fn take(session: &mut Session) -> HostState {
        HostState {
            ftl: std::mem::replace(&mut session.ftl, Box::new(NoFtl)),
            oracle: std::mem::replace(&mut session.oracle, crate::oracle::Oracle::new(1, 1)),
            host: session.host.clone(),
            next_write_id: session.next_write_id,
            next_request_id: session.next_request_id,
            ftl_failed: session.ftl_failed,
        }
    }
    fn put_back(self, session: &mut Session) {
        session.ftl = self.ftl;
        session.oracle = self.oracle;
        session.host = self.host;
        session.next_write_id = self.next_write_id;
        session.next_request_id = self.next_request_id;
        session.ftl_failed = self.ftl_failed;
    }
}

/// One cut on the base run's drive: roll back to it, test, roll forward.
fn test_point(plan: &Plan, session: &mut Session, request: &Request, cut: PowerCut) -> PointResult {
    let image = session.flash.enter_crash_image(cut);
    let mut result = new_result(cut, request.id);
    result.tore = image.torn_pages + image.torn_blocks > 0;
    (result.torn_pages, result.torn_blocks) = (image.torn_pages, image.torn_blocks);
    let saved = HostState::take(session);
    let checker = request.history.checker(request.in_flight);
    recover_and_check(plan, session, checker, cut, &mut result);
    take_findings(session, &mut result);
    session.flash.leave_crash_image(image);
    saved.put_back(session);
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
    for &cut in cuts {
        let at = PowerCut { op_index: session.flash.op_index(), during: false };
        let image = session.flash.enter_crash_image(at);
        *session.flash.log_mut() = flush_log.clone();
        let saved = HostState::take(&mut session);
        let mut result = new_result(cut, request.id);
        if !flush_log.is_clean() {
            result.stage = Some(Stage::EmergencyFlush);
        } else {
            let checker = request.history.checker(request.in_flight).all_acknowledged_durable();
            recover_and_check(plan, &mut session, checker, cut, &mut result);
        }
        take_findings(&mut session, &mut result);
        session.flash.leave_crash_image(image);
        saved.put_back(&mut session);
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
    let _ = session.flash.take_log(); // the base run reports the run's own violations
    session.flash.nand_mut().journal_start();
    session.flash.set_request(None);
    if let Err(e) = session.ftl.emergency_flush(&mut session.flash) {
        record_violation(&mut session, Rule::FtlError, format!("the emergency flush failed: {e}"));
    }
    let log = session.flash.take_log();
    Ok((session, log))
}

/// Steps 2–5 of a crash test (see the module docs). Findings go to the log.
fn recover_and_check(
    plan: &Plan,
    session: &mut Session,
    mut checker: CrashChecker,
    cut: PowerCut,
    result: &mut PointResult,
) {
    session.flash.restore_power();
    session.flash.set_request(None);
    let final_stage = if plan.opts.nested { Stage::RecoveryAfterNestedCut } else { Stage::Recovery };
    if plan.opts.nested && !first_recovery_cut(plan, session, &mut point_rng(plan, cut, "nested"), result) {
        return;
    }
    let start = session.flash.op_index();
    if let Err(e) = mount_fresh(session) {
        record_violation(session, Rule::RecoveryFailed, format!("mount after the power cut failed: {e}"));
        note_stage(session, result, final_stage);
        return;
    }
    result.recovery_ops = session.flash.op_index() - start;
    if note_stage(session, result, final_stage) {
        return;
    }
    let verified = verify_disk(session, &mut checker, plan.config.logical_sectors, plan.opts.verify_chunk_sectors);
    if verified {
        let mut ck = session.flash.checker();
        checker.finish(&mut ck);
    }
    if note_stage(session, result, Stage::Verify) || plan.opts.post_requests == 0 {
        return;
    }
    session.oracle = checker.recovered_oracle();
    run_post_workload(plan, session, &mut point_rng(plan, cut, "post"));
    note_stage(session, result, Stage::PostWorkload);
}

/// Record where the first finding appeared; true if the log has one.
fn note_stage(session: &Session, result: &mut PointResult, stage: Stage) -> bool {
    let found = !session.flash.log().is_clean();
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
fn first_recovery_cut(
    plan: &Plan,
    session: &mut Session,
    rng: &mut crate::seed::Rng,
    result: &mut PointResult,
) -> bool {
    let mark = session.flash.nand().journal_len();
    let start = session.flash.op_index();
    let mounted = mount_fresh(session);
    let changes = state_changing_ops(session.flash.nand(), mark);
    let end = session.flash.op_index();
    if let Err(e) = mounted {
        record_violation(session, Rule::RecoveryFailed, format!("mount after the power cut failed: {e}"));
        note_stage(session, result, Stage::Recovery);
        return false;
    }
    session.flash.nand_mut().journal_rollback(mark);
    session.flash.restore_power();
    session.flash.reset_op_index(start);
    let n = changes.len() as u32;
    let wanted = plan.opts.nested_at.unwrap_or_else(|| draw_nested(rng, n));
    // After the last state-changing operation there is nothing to tear.
    let nested = if wanted.nth >= n { NestedCut { nth: n, during: false } } else { wanted };
    let op_index = changes.get(nested.nth as usize).copied().unwrap_or(end);
    let cut = PowerCut { op_index, during: nested.during };
    (result.nested_cut, result.recovery_cut, result.recovery_state_changes) = (Some(nested), Some(cut), n);
    session.flash.schedule_power_cut(cut);
    let _ = session.flash.take_torn();
    let _ = mount_fresh(session); // fails with the power cut (unless it falls after the last operation)
    (result.recovery_torn_pages, result.recovery_torn_blocks) = session.flash.take_torn();
    session.flash.restore_power();
    note_stage(session, result, Stage::Recovery);
    true
}

/// One of the `2n + 1` distinct nested cuts, uniformly.
fn draw_nested(rng: &mut crate::seed::Rng, n: u32) -> NestedCut {
    let j = rng.random_range(0..=2 * n);
    NestedCut { nth: j / 2, during: j % 2 == 1 }
}

/// The operations that changed flash since journal entry `mark`, in order.
fn state_changing_ops(nand: &Nand, mark: usize) -> Vec<u64> {
    let mut ops: Vec<u64> = Vec::new();
    for at in mark..nand.journal_len() {
        let op = nand.journal_op_of(at).expect("an entry below the journal's length");
        if ops.last() != Some(&op) {
            ops.push(op);
        }
    }
    ops
}

/// Build a fresh FTL instance and mount it on the flash: a power cycle,
/// the old instance's DRAM is gone.
fn mount_fresh(session: &mut Session) -> Result<(), FtlError> {
    session.flash.release_ftl_buffers();
    session.ftl = (session.factory)(&session.env).map_err(FtlError::Mount)?;
    session.ftl.mount(&mut session.flash)
}

/// Read every logical sector through the recovered FTL into the checker.
/// False if the FTL failed a read (recorded).
fn verify_disk(session: &mut Session, checker: &mut CrashChecker, total: u64, chunk: u32) -> bool {
    let mut lba = 0;
    let chunk = u64::from(chunk.max(1));
    // Hints two chunks ahead: the FTL warms its map for the later one and
    // the flash pages of the nearer one (a speed hint; it changes nothing).
    let hint = |session: &mut Session, at: u64| {
        if at < total {
            session.ftl.prefetch(&session.flash, at, (total - at).min(chunk) as u32);
        }
    };
    hint(session, 0);
    hint(session, chunk);
    while lba < total {
        let n = (total - lba).min(chunk) as u32;
        hint(session, lba + 2 * chunk);
        let buf = session.flash.alloc_host_read(n);
        let io = IoRequest { id: u64::MAX, lba, sectors: n, buf };
        match session.ftl.read(&mut session.flash, &io) {
            Ok(()) => {
                let _ = session.flash.inspect_buffer(buf, |runs, ck| checker.check_read(ck, lba, runs));
            }
            Err(e) => {
                session.flash.free_host_buffer(buf);
                record_violation(
                    session,
                    Rule::FtlError,
                    format!("read of {n} sectors at LBA {lba} after recovery failed: {e}"),
                );
                return false;
            }
        }
        session.flash.free_host_buffer(buf);
        lba += u64::from(n);
    }
    true
}

/// More workload on the recovered drive, its reads checked; then the
/// sectors it wrote are read back.
fn run_post_workload(plan: &Plan, session: &mut Session, rng: &mut crate::seed::Rng) {
    let seed = rng.random::<u64>();
    let Ok(mut w) = new_workload(plan.config, plan.spec, seed) else { return };
    let mut written = Vec::new();
    for _ in 0..plan.opts.post_requests {
        let Ok(Some(req)) = next_request(&mut w) else { break };
        if session.submit(&req).is_err() || session.ftl_failed() {
            return;
        }
        if req.op == HostOp::Write {
            written.push((req.lba, req.sectors));
        }
        if !session.flash.log().is_clean() {
            return;
        }
    }
    for (lba, sectors) in written {
        let read = HostRequest { op: HostOp::Read, lba, sectors, arrival_ns: 0, job: 0 };
        if session.submit(&read).is_err() || session.ftl_failed() || !session.flash.log().is_clean() {
            return;
        }
    }
}

fn finding(rule: Rule, message: String) -> Violation {
    let severity = crate::violation::Severity::Error;
    Violation { rule, severity, op_index: 0, request_id: None, address: 0, message, source: None }
}

/// Record a crash finding that is not a read (recovery failed, a read failed).
fn record_violation(session: &mut Session, rule: Rule, message: String) {
    let mut v = finding(rule, message);
    (v.op_index, v.request_id) = (session.flash.op_index(), session.flash.request());
    session.flash.log_mut().record(v);
}

/// Stands in for the base run's FTL while a crash point is tested.
struct NoFtl;

impl Ftl for NoFtl {
    fn info(&self) -> crate::ftl::FtlInfo {
        crate::ftl::FtlInfo { name: "none", guarantee: Guarantee::Baseline, oob_bytes: 0 }
    }
    fn format(&mut self, _: &mut dyn crate::flash::Flash) -> Result<(), FtlError> {
        Ok(())
    }
    fn mount(&mut self, _: &mut dyn crate::flash::Flash) -> Result<(), FtlError> {
        Ok(())
    }
    fn read(&mut self, _: &mut dyn crate::flash::Flash, _: &IoRequest) -> Result<(), FtlError> {
        Err(FtlError::Mount("no FTL".into()))
    }
    fn write(&mut self, _: &mut dyn crate::flash::Flash, _: &IoRequest) -> Result<crate::ftl::Durability, FtlError> {
        Err(FtlError::Mount("no FTL".into()))
    }
    fn trim(&mut self, _: &mut dyn crate::flash::Flash, _: u64, _: u64) -> Result<(), FtlError> {
        Ok(())
    }
    fn flush(&mut self, _: &mut dyn crate::flash::Flash) -> Result<(), FtlError> {
        Ok(())
    }
    fn idle(&mut self, _: &mut dyn crate::flash::Flash) -> Result<crate::ftl::IdleOutcome, FtlError> {
        Ok(crate::ftl::IdleOutcome::Nothing)
    }
    fn shutdown(&mut self, _: &mut dyn crate::flash::Flash) -> Result<(), FtlError> {
        Ok(())
    }
    fn stats(&self) -> crate::ftl::FtlStats {
        crate::ftl::FtlStats::default()
    }
}
