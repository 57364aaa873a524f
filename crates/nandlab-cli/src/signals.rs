//! SIGINT and SIGTERM during a run: the first asks the run to stop at the
//! next request boundary (the library polls a [`StopFlag`]), so the partial
//! summary is printed and the report written, marked interrupted; a second
//! one, once the first was seen, exits at once with [`INTERRUPTED`]
//! (nothing more is printed or written; an output's temporary
//! `.nandlab-*.tmp` file may stay behind).
//!
//! Why not the default action: a run can take hours, and killing it loses
//! everything it measured; a user who asks twice still gets out at once.

use crate::exit::INTERRUPTED;
use nandlab::run::StopFlag;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Install the handlers; the flag they set. Called before a command's
/// first line is printed, so a signal sent after it is always handled.
pub fn install() -> StopFlag {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registered first, so it runs first: exits when the flag is already set.
        let second =
            signal_hook::flag::register_conditional_shutdown(signal, i32::from(INTERRUPTED), Arc::clone(&flag));
        let first = signal_hook::flag::register(signal, Arc::clone(&flag));
        if let Err(e) = second.and(first) {
            eprintln!("warning: cannot handle signal {signal} ({e}): it will end the run without a report");
        }
    }
    StopFlag::new(flag)
}

/// Say on stderr that the run was interrupted and how to quit at once.
pub fn announce() {
    eprintln!("nandlab: interrupted; writing the partial report (interrupt again to quit at once)");
}
