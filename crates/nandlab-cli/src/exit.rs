//! Exit codes of `nandlab`, and the one way to refuse bad input.
//!
//! 0 when a run is clean, [`VIOLATIONS`] when it found violations (or a
//! bench run failed), [`INPUT`] for bad input (configuration, options,
//! files), [`INTERRUPTED`] when a run without violations was interrupted
//! (SIGINT, SIGTERM; see `signals`). A finding outranks an interruption:
//! what was found stands, however the run ended.

use std::process::ExitCode;

/// Violations were found (a run), or a measurement failed (a bench).
pub const VIOLATIONS: u8 = 1;
/// Bad input: nothing was run, or the run could not go on.
pub const INPUT: u8 = 2;
/// Interrupted (128 + SIGINT, as shells report it).
pub const INTERRUPTED: u8 = 130;

/// Print `error: MESSAGE` on stderr; exit code [`INPUT`].
pub fn input_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(INPUT)
}

/// The exit code of a run: a finding ([`VIOLATIONS`]) before an
/// interruption ([`INTERRUPTED`]).
pub fn of_run(findings: bool, interrupted: bool) -> ExitCode {
    if findings {
        ExitCode::from(VIOLATIONS)
    } else if interrupted {
        ExitCode::from(INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    }
}
