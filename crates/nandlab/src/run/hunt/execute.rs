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
use crate::flash::{FlashObserver, FlashOp};
use crate::ftl::foreign::progress::{self, Call};
use crate::ftl::FtlError;
use crate::run::{RunError, Session};
use crate::violation::Rule;
use crate::workload::HostOp;
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
}

impl Position {
    fn phase(self) -> String {
        match self.event {
            None => format!("request {}", self.index),
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
    let at = Cell::new(Position { index: 0, event: None });
    let covered = RefCell::new(std::mem::take(coverage));
    let outcome = panics::catch(|| run_inner(base, target, swarm, &at, &covered));
    *coverage = covered.into_inner();
    match outcome {
        Ok(outcome) => outcome,
        Err(p) => Outcome::Found(Finding {
            rule: "ftl_panic".to_string(),
            message: p.message,
            location: Some(p.location),
            phase: at.get().phase(),
            request_index: at.get().index,
        }),
    }
}

/// Counts every flash operation in the process's progress record, so the
/// parent of an isolated run sees a Rust FTL's progress as it sees a
/// library's (whose adapter counts them itself): a count that stops
/// growing while a call is pending is a hang ([`progress`]).
struct Heartbeat;

impl FlashObserver for Heartbeat {
    fn after_op(&mut self, _op: &FlashOp) {
        progress::flash_op();
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
    if !target.ftl.starts_with("lib:") {
        session.drive_mut().add_observer(Box::new(Heartbeat));
    }
    let mut workload = SwarmWorkload::new(swarm);
    let mut events = swarm.events.iter().peekable();
    for index in 0..swarm.requests {
        at.set(Position { index, event: None });
        let req = workload.next_request();
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
        while let Some((_, event)) = events.next_if(|(e_at, _)| *e_at == index) {
            at.set(Position { index, event: Some(*event) });
            if matches!(event, Event::CleanMount | Event::UncleanMount) {
                sample(&session, covered); // a mount starts a fresh instance at zero
            }
            progress::enter(if *event == Event::Idle { Call::Idle } else { Call::Mount }, None);
            let applied = apply_event(&mut session, *event);
            progress::leave();
            if let Err(e) = applied {
                return skipped(e);
            }
            if let Some(f) = finding(&session, at.get()) {
                return Outcome::Found(f);
            }
        }
    }
    at.set(Position { index: swarm.requests, event: Some(Event::CleanMount) });
    sample(&session, covered);
    progress::enter(Call::Mount, None);
    let applied = apply_event(&mut session, Event::CleanMount);
    progress::leave();
    if let Err(e) = applied {
        return skipped(e);
    }
    finding(&session, at.get()).map_or(Outcome::Clean, Outcome::Found)
}

/// Add what the running FTL instance's counters reached to `covered`.
fn sample(session: &Session, covered: &RefCell<Coverage>) {
    if session.drive().has_ftl() {
        covered.borrow_mut().add(&session.drive().ftl().stats());
    }
}

fn skipped(e: RunError) -> Outcome {
    Outcome::Skipped(e.to_string())
}

/// Do `event` on the session (failures are recorded in its log).
fn apply_event(session: &mut Session, event: Event) -> Result<(), RunError> {
    match event {
        Event::Verify => {}
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
