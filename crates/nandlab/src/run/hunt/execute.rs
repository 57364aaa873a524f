//! One hunt run: the workload of its [`Swarm`], with verification passes,
//! mount cycles and idle time where the swarm puts them, a final clean
//! mount and verification, and every check of a stress run on the way.
//!
//! A run stops at its first finding: an error-severity violation (a NAND
//! rule, a read the oracle rejects, an FTL error), a panic (caught, see
//! [`super::panics`]), or the FTL's `NoSpace` while the host's data fits
//! the logical capacity it stated (`ftl_out_of_space`: the host never
//! addresses more than that capacity, so any such error is a slow leak of
//! space or a miscount).

use super::coverage::Coverage;
use super::panics;
use super::swarm::{Event, Swarm};
use super::workload::SwarmWorkload;
use super::Target;
use crate::config::Config;
use crate::flash::PowerCut;
use crate::flash::{FlashObserver, FlashOp};
use crate::ftl::foreign::progress::{self, Call};
use crate::ftl::FtlError;
use crate::ftl::Guarantee;
use crate::nand::payload::WriteId;
use crate::oracle::crash_checker::{CrashHistory, PendingOp};
use crate::run::{RunError, Session};
use crate::violation::Rule;
use crate::workload::{HostOp, HostRequest};
use std::cell::{Cell, RefCell};

/// What a run found.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Finding {
    /// The rule: a [`Rule`] name, `ftl_panic` or `ftl_out_of_space`.
    pub rule: String,
    pub message: String,
    /// Where in the code (a panic's `file:line:col`), if known.
    pub location: Option<String>,
    /// What the run was doing: `request N`, `verify after request N`, ….
    pub phase: String,
    /// The workload request index the run had reached.
    pub request_index: u64,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Clean,
    Found(Finding),
    /// The drawn configuration cannot run (the FTL refused to format it,
    /// or the run hit a limit of the host side): not a finding.
    Skipped(String),
}

/// Where the run is, for a finding's `phase`.
#[derive(Copy, Clone)]
struct Position {
    index: u64,
    event: Option<Event>,
    /// The FTL call a host request makes (None: an event's).
    call: Option<Call>,
}

impl Position {
    fn phase(self) -> String {
        match self.event {
            None => format!("request {}", self.index),
            Some(Event::PowerCut { .. }) => format!("recovery from a power cut during request {}", self.index),
            Some(e) => format!("{} after request {}", e.name(), self.index),
        }
    }
}

/// Run `swarm` against `target` on `base`'s device.
pub fn run(base: &Config, target: &Target, swarm: &Swarm) -> Outcome {
    run_covered(base, target, swarm, &mut Coverage::new())
}

/// [`run`], adding the (counter, bucket) pairs the FTL's event counters
/// reached to `coverage` (see [`super::coverage`]).
pub fn run_covered(base: &Config, target: &Target, swarm: &Swarm, coverage: &mut Coverage) -> Outcome {
    let at = Cell::new(Position { index: 0, event: None, call: None });
    let covered = RefCell::new(std::mem::take(coverage));
    let outcome = panics::catch(|| run_inner(base, target, swarm, &at, &covered));
    *coverage = covered.into_inner();
    match outcome {
        Ok(outcome) => outcome,
        Err(p) if p.message.starts_with(RUNAWAY) => {
            let position = at.get();
            let call = match (position.event, position.call) {
                (Some(e), _) => e.name().to_string(),
                (None, Some(c)) => c.function().to_string(),
                (None, None) => "the FTL call".to_string(),
            };
            Outcome::Found(Finding {
                rule: "ftl_hang".to_string(),
                message: format!("[Error] ftl_hang: {call} issued {}", &p.message[RUNAWAY.len()..]),
                location: Some(call),
                phase: position.phase(),
                request_index: position.index,
            })
        }
        Err(p) => Outcome::Found(Finding {
            rule: "ftl_panic".to_string(),
            message: p.message,
            location: Some(p.location),
            phase: at.get().phase(),
            request_index: at.get().index,
        }),
    }
}

/// Flash operations one FTL call (a host request, or a mount or idle
/// time with the verification pass after it) may issue, per page of the
/// device, before the run calls it a hang: reading, programming and
/// erasing the whole device a few times over is the most any call of a
/// sound FTL needs (a mount scans every page once; a verification pass
/// reads the logical space once; foreground GC at its worst copies a
/// unit's victims twice over before giving up), so 16 times is a loop.
pub const CALL_FLASH_OPS_PER_PAGE: u64 = 16;

/// The message prefix of the panic a runaway call ends with.
const RUNAWAY: &str = "nandlab hunt: runaway FTL call: ";

/// Counts every flash operation in the process's progress record, so the
/// parent of an isolated run sees a Rust FTL's progress as it sees a
/// library's (whose adapter counts them itself): a count that stops
/// growing while a call is pending is a hang ([`progress`]). And counts
/// the operations of the current call: one that issues more than
/// `limit` is an FTL looping *with* flash operations, which the parent's
/// watch never sees stall; the observer ends it by a panic (unwinding out
/// of the Rust FTL to the run's [`panics::catch`]), reported as
/// `ftl_hang`. Deterministic: the count, not the time, decides.
struct Heartbeat {
    in_call: std::rc::Rc<Cell<u64>>,
    limit: u64,
}

impl FlashObserver for Heartbeat {
    fn after_op(&mut self, _op: &FlashOp) {
        progress::flash_op();
        let n = self.in_call.get() + 1;
        self.in_call.set(n);
        if n == self.limit + 1 {
            // Once: the unwinding drops the session, whose flash
            // operations (if any) must not panic again.
            std::panic::panic_any(format!(
                "{RUNAWAY}more than {} flash operations in one call ({CALL_FLASH_OPS_PER_PAGE} per page of the device) \
                 without returning",
                self.limit
            ));
        }
    }
}

/// The FTL call a host request or an event makes.
fn call_of(op: HostOp) -> Call {
    match op {
        HostOp::Read => Call::Read,
        HostOp::Write => Call::Write,
        HostOp::Trim => Call::Trim,
        HostOp::Flush => Call::Flush,
    }
}

fn run_inner(
    base: &Config,
    target: &Target,
    swarm: &Swarm,
    at: &Cell<Position>,
    covered: &RefCell<Coverage>,
) -> Outcome {
    let config = swarm.apply(base);
    let factory = (target.factory)(&config);
    let mut session = match Session::with_factory(&config, factory, swarm.seed, 1, 4) {
        Ok(s) => s,
        Err(e) => return Outcome::Skipped(e.to_string()),
    };
    let in_call = std::rc::Rc::new(Cell::new(0u64));
    if !target.ftl.starts_with("lib:") && !target.ftl.starts_with("jasmine:") {
        let limit = CALL_FLASH_OPS_PER_PAGE * config.geometry.pages();
        session.drive_mut().add_observer(Box::new(Heartbeat { in_call: in_call.clone(), limit }));
    }
    let mut workload = SwarmWorkload::new(swarm);
    let mut events = swarm.events.iter().peekable();
    let mut cuts = PowerCuts::new(&session, swarm);
    for index in 0..swarm.requests {
        let req = workload.next_request();
        at.set(Position { index, event: None, call: Some(call_of(req.op)) });
        in_call.set(0);
        let before = cuts.before(&mut session);
        progress::enter(call_of(req.op), Some((index, req.lba, u64::from(req.sectors))));
        let submitted = session.submit(&req);
        progress::leave();
        if let Err(e) = submitted {
            return skipped(e);
        }
        if let Some(f) = finding(&session, at.get()) {
            sample(&session, covered);
            return Outcome::Found(f);
        }
        if let Some(cut) = cuts.after(&mut session, &req, before) {
            at.set(Position { index, event: Some(cut), call: None });
            sample(&session, covered); // the cut ends this instance
            in_call.set(0);
            progress::enter(Call::Mount, None);
            let recovered = cuts.cut_and_recover(&mut session, &req, before, cut);
            progress::leave();
            if let Err(e) = recovered {
                return skipped(e);
            }
            if let Some(f) = finding(&session, at.get()) {
                return Outcome::Found(f);
            }
        }
        while let Some((_, event)) = events.next_if(|(e_at, _)| *e_at == index) {
            if let Event::PowerCut { .. } = event {
                cuts.arm(*event);
                continue;
            }
            at.set(Position { index, event: Some(*event), call: None });
            if matches!(event, Event::CleanMount | Event::UncleanMount) {
                sample(&session, covered); // a mount starts a fresh instance at zero
            }
            in_call.set(0);
            progress::enter(if *event == Event::Idle { Call::Idle } else { Call::Mount }, None);
            let applied = apply_event(&mut session, *event);
            progress::leave();
            if let Err(e) = applied {
                return skipped(e);
            }
            if let Some(f) = finding(&session, at.get()) {
                return Outcome::Found(f);
            }
            if matches!(event, Event::CleanMount | Event::UncleanMount) {
                cuts.all_durable();
            }
        }
    }
    at.set(Position { index: swarm.requests, event: Some(Event::CleanMount), call: None });
    sample(&session, covered);
    in_call.set(0);
    progress::enter(Call::Mount, None);
    let applied = apply_event(&mut session, Event::CleanMount);
    progress::leave();
    if let Err(e) = applied {
        return skipped(e);
    }
    finding(&session, at.get()).map_or(Outcome::Clean, Outcome::Found)
}

/// The power cuts of a run (feature `power-cuts`): what a cut may lose is
/// kept as `crash` keeps it ([`CrashHistory`]: the durable floor and the
/// writes and trims since), only in runs that draw a cut. An armed cut
/// falls in the next request that issues flash operations: the request
/// runs to its end with the NAND's undo journal on, then the drive is
/// rolled back to the cut operation, which is torn if the cut falls
/// `during` it ([`crate::run::drive::Drive::cut_power_for_test`], the
/// machinery of `crash`), and the rollback is kept. A fresh instance
/// mounts, every logical sector is read back and checked by the crash
/// rules for the FTL's guarantee ([`CrashChecker`]), and the run goes on
/// from what recovery showed. Not drawn with the media reliability model
/// on (the undo journal does not roll the model back; `crash` refuses it
/// too).
struct PowerCuts {
    /// `None`: the run has no cut (nothing is kept).
    history: Option<CrashHistory>,
    guarantee: Guarantee,
    armed: Option<Event>,
}

/// The host's view of a request before it was submitted.
#[derive(Copy, Clone)]
struct Before {
    ops: u64,
    write: WriteId,
    request: u64,
}

impl PowerCuts {
    fn new(session: &Session, swarm: &Swarm) -> PowerCuts {
        let has_cuts = swarm.events.iter().any(|(_, e)| matches!(e, Event::PowerCut { .. }));
        let drive = session.drive();
        let on = has_cuts && drive.has_ftl() && drive.flash().reliability().is_none();
        let guarantee = if drive.has_ftl() { drive.ftl().info().guarantee } else { Guarantee::Baseline };
        let history = on.then(|| CrashHistory::new(session.host().oracle().logical_sectors(), 1, guarantee));
        PowerCuts { history, guarantee, armed: None }
    }

    fn arm(&mut self, cut: Event) {
        if self.history.is_some() {
            self.armed = Some(cut);
        }
    }

    /// Everything acknowledged is on flash (after a mount cycle).
    fn all_durable(&mut self) {
        if let Some(h) = &mut self.history {
            h.make_durable();
        }
    }

    fn before(&mut self, session: &mut Session) -> Before {
        if self.armed.is_some() {
            session.drive_mut().start_journal();
        }
        Before {
            ops: session.drive().flash().op_index(),
            write: session.host().next_write_id(),
            request: session.requests(),
        }
    }

    /// After request `req`: the cut to make in it, if one is armed and
    /// the request issued flash operations; else record it.
    fn after(&mut self, session: &mut Session, req: &HostRequest, before: Before) -> Option<Event> {
        let history = self.history.as_mut()?;
        let ops = session.drive().flash().op_index() - before.ops;
        if let Some(Event::PowerCut { nth, during }) = self.armed.filter(|_| ops > 0) {
            self.armed = None;
            let cut = PowerCut { op_index: before.ops + u64::from(nth) % ops, during };
            return Some(Event::PowerCut { nth: (cut.op_index - before.ops) as u32, during: cut.during });
        }
        if self.armed.is_some() {
            session.drive_mut().clear_journal();
        }
        let pending = PendingOp::of(req, before.request, before.write, before.write.saturating_sub(1));
        history.record(pending, req.op == HostOp::Flush, session.host().last_durability());
        None
    }

    /// Cut the power at `cut` (its `nth` counted from `before.ops`) in the
    /// request just served, recover and check (findings go to the log).
    fn cut_and_recover(
        &mut self,
        session: &mut Session,
        req: &HostRequest,
        before: Before,
        cut: Event,
    ) -> Result<(), RunError> {
        let Event::PowerCut { nth, during } = cut else { return Ok(()) };
        let Some(history) = self.history.as_mut() else { return Ok(()) };
        let in_flight = PendingOp::of(req, before.request, before.write, before.write.saturating_sub(1));
        let at = PowerCut { op_index: before.ops + u64::from(nth), during };
        let (drive, host) = session.parts_mut();
        drop(drive.cut_power_for_test(at)); // the run goes on from the cut: nothing to restore
        drive.stop_journal();
        drive.restore_power();
        drive.set_request(None);
        let when = format!("flash operation {}{}", at.op_index, if during { " (torn)" } else { "" });
        if let Err(e) = drive.power_cycle(false) {
            drive.record_violation(Rule::RecoveryFailed, format!("mount after a power cut at {when} failed: {e}"));
            return Ok(());
        }
        let mut checker = history.checker(in_flight);
        let total = host.oracle().logical_sectors();
        if crate::run::crash::point::verify_disk(drive, &mut checker, total, 8192) {
            checker.finish(&mut drive.checker());
        }
        if drive.flash().log().errors() > 0 {
            return Ok(());
        }
        let recovered = checker.recovered_oracle();
        *host = host.continued_with(recovered.clone());
        *history = CrashHistory::restored(self.guarantee, recovered, &[]);
        Ok(())
    }
}

/// Add what the running FTL instance's counters reached to `covered`.
fn sample(session: &Session, covered: &RefCell<Coverage>) {
    if session.drive().has_ftl() {
        let ftl = session.drive().ftl();
        covered.borrow_mut().add_instance(&ftl.stats(), &ftl.paths());
    }
}

fn skipped(e: RunError) -> Outcome {
    Outcome::Skipped(e.to_string())
}

/// Do `event` on the session (failures are recorded in its log).
fn apply_event(session: &mut Session, event: Event) -> Result<(), RunError> {
    match event {
        Event::Verify => {}
        Event::PowerCut { .. } => return Ok(()), // armed, made in the next request (see `PowerCuts`)
        Event::Idle => {
            session.idle(u32::MAX);
            return Ok(());
        }
        Event::CleanMount | Event::UncleanMount => {
            let clean = event == Event::CleanMount;
            if !clean {
                // What a flush acknowledged must survive the power loss.
                let (drive, _) = session.parts_mut();
                if let Err(e) = drive.flush() {
                    drive.ftl_error("flush before the power loss", e);
                    return Ok(());
                }
            }
            if let Err(e) = session.power_cycle(clean) {
                let what = if clean { "mount after a clean shutdown" } else { "mount after a power loss" };
                session.parts_mut().0.ftl_error(what, e);
                return Ok(());
            }
        }
    }
    session.verify_all(8192).map(|_| ())
}

/// The session's first finding, if it has one.
fn finding(session: &Session, at: Position) -> Option<Finding> {
    let log = session.drive().flash().log();
    if log.errors() == 0 {
        return None;
    }
    let v = log.first_error()?;
    // The first error is the first FTL failure: classified by its error
    // code (a library FTL's message need not say "no free space").
    let no_space = session.drive().first_failure_code() == Some(FtlError::CODE_NO_SPACE);
    let rule =
        if v.rule == Rule::FtlError && no_space { "ftl_out_of_space".to_string() } else { v.rule.name().to_string() };
    Some(Finding { rule, message: v.to_string(), location: None, phase: at.phase(), request_index: at.index })
}
